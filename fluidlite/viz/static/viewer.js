(function(){
"use strict";
// fluidlite's hierarchical program viewer. The data (fl-data) is the program's graph plus its
// group tree (fluidlite/viz/hierarchy.py); ELK (elkjs, inlined as flElkWorker) lays out what
// is visible in a Web Worker made from a Blob URL. Names are data: every string that reaches
// the DOM goes through esc() or textContent.
var ALL=JSON.parse(document.getElementById("fl-data").textContent);
var VI=+((location.hash.match(/block=(\d+)/)||[0,0])[1]);if(!ALL.views[VI])VI=0;
var D=ALL.views[VI],N=D.nodes,E=D.edges,G=D.groups||[];
N.forEach(function(n){n.ns=D.strs[n.ns];if(n.cs!==undefined)n.cs=D.strs[n.cs];});
var $=function(id){return document.getElementById(id);};
var stage=$("stage"),svg=$("svg"),vp=$("vp");
function esc(s){return String(s).replace(/[&<>"']/g,function(c){return {"&":"&amp;","<":"&lt;",
 ">":"&gt;",'"':"&quot;","'":"&#39;"}[c];}).replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g,
 function(c){return "\\x"+("0"+c.charCodeAt(0).toString(16)).slice(-2);});}
var GROUP_LABEL={io:"feed / fetch",forward:"forward",loss:"loss",backward:"backward",
 gradient_clip:"gradient clip",regularization:"regularization",optimize:"optimizer",
 lr_schedule:"LR schedule",distributed:"distributed"};
function opStyle(g){return D.opStyles[g]||D.opStyles.forward;}
// time overlay (profile=): each op's own measured average ms per call (D.profop, keyed
// "block:index"; an op it lacks ran in no step of the timed plan: 0, drawn grey; a profile without
// per-op records falls back to the op type's average, D.prof), as a heat colour; groups by the
// sum of their ops, on a scale up to the whole program's time
var PROF=D.prof||null,PROFOP=D.profop||null,profLo=Infinity,profHi=0,profSum=0;
function opMs(i){var n=N[i],p;if(PROFOP){p=PROFOP[n.b+":"+n.ix];return p?p[0]:0;}
 p=PROF&&PROF[n.t];return p?p[0]:0;}
if(PROF)N.forEach(function(n,i){if(n.k!=="o")return;var v=opMs(i);profSum+=v;if(v>0){
 profLo=Math.min(profLo,v);profHi=Math.max(profHi,v);}});
function heat(ms,hi){hi=hi||profHi;var f=ms>0&&hi>profLo?Math.log(ms/profLo)/Math.log(hi/profLo):0;
 f=Math.max(0,Math.min(1,f));var a=[255,243,176],b=[230,126,34],c=[146,43,33],lo=f<.5?a:b,hi2=f<.5?b:c,
 t=f<.5?f*2:f*2-1;return "rgb("+[0,1,2].map(function(k){return Math.round(lo[k]+(hi2[k]-lo[k])*t);})
 .join(",")+")";}
function opFill(i){var n=N[i];if(opts.time&&PROF&&!(opMs(i)>0))return ["rgb(229,231,233)","#5D6D7E"];
 if(opts.time&&PROF)return [heat(opMs(i)),opMs(i)>0&&
 Math.log(opMs(i)/profLo)>0.6*Math.log(profHi/profLo)?"#FFFFFF":"#1B2631"];var st=opStyle(n.g);
 return [st[0],st[1]];}
// ---- derived structure
var OPS=[],ins=N.map(function(){return [];}),outs=N.map(function(){return [];});
N.forEach(function(n,i){if(n.k==="o")OPS.push(i);});
E.forEach(function(e){outs[e[0]].push(e[1]);ins[e[1]].push(e[0]);});
var gKids=G.map(function(){return [];}),gOps=G.map(function(){return [];}),rootG=[],rootOps=[];
G.forEach(function(g,i){(g.p<0?rootG:gKids[g.p]).push(i);});
OPS.forEach(function(i){var p=N[i].gp;if(p===undefined||p<0)rootOps.push(i);else gOps[p].push(i);});
// a diff: how many ops of each group were added / changed (shown on the collapsed group)
var gDiff=G.map(function(){return [0,0,0,0];});
OPS.forEach(function(i){var d=N[i].d||0,p=N[i].gp;if(!d)return;while(p!==undefined&&p>=0){gDiff[p][d]++;
 p=G[p].p;}});
function ancestors(g){var out=[];while(g>=0){out.unshift(g);g=G[g].p;}return out;}
function isState(v){var n=N[v];return n.k==="v"&&(n.g==="parameter"||n.g==="persistable");}
// data flow between ops in program order: a reader takes a variable from its last writer
// before it (an optimizer's in-place ParamOut does not feed the forward pass that ran first)
var FLOW=[],SRC=[],pred=N.map(function(){return [];}),succ=N.map(function(){return [];});
N.forEach(function(n,v){if(n.k!=="v")return;var ws=ins[v].slice().sort(function(a,b){
 return N[a].ix-N[b].ix;});outs[v].forEach(function(c){var w=-1;for(var k=0;k<ws.length;k++)
  if(ws[k]!==c&&N[ws[k]].ix<N[c].ix&&N[ws[k]].d!==3)w=ws[k];
  if(w>=0){FLOW.push([w,c,v]);succ[w].push(c);pred[c].push(w);}
  else if(!isState(v))SRC.push([v,c]);});});
var expanded={},groupOn={},sel=null,trace=null,
 opts={params:true,shapes:true,diffOnly:false,elkLabels:true,time:false};
var view={x:0,y:0,k:1},lay=null,boxes={},results=[],resAt=-1,layouts=0,worker=null,pending={};
// ---- sub-blocks (while bodies, branches), drawn inside their op when opened
var subOpen={},SUBV={};
function subView(b){if(SUBV[b]!==undefined)return SUBV[b];var v=null;
 ALL.views.forEach(function(x){if(x.block===b&&x!==D)v=x;});
 if(v){var nd=v.nodes,i2=nd.map(function(){return [];}),o2=nd.map(function(){return [];}),ops=[],flow=[];
  v.edges.forEach(function(e){o2[e[0]].push(e[1]);i2[e[1]].push(e[0]);});
  nd.forEach(function(n,k){if(n.k==="o")ops.push(k);});
  nd.forEach(function(n,x){if(n.k!=="v")return;o2[x].forEach(function(c){var w=-1;i2[x].forEach(
   function(a){if(a!==c&&nd[a].ix<nd[c].ix&&(w<0||nd[a].ix>nd[w].ix))w=a;});
   if(w>=0)flow.push([w,c,x]);});});v={v:v,ops:ops,flow:flow};}
 return (SUBV[b]=v);}
function subBlocks(i){return (N[i].sb||[]).filter(function(b){return !!subView(b);});}
function subNode(u){var m=u.match(/^s(\d+)_(\d+)$/);var sv=subView(+m[1]);
 return {b:+m[1],k:+m[2],n:sv.v.nodes[+m[2]],v:sv.v};}
function toggleSub(i){subOpen[i]=!subOpen[i];relayout({id:"o"+i});}
// ---- visibility
function opShown(i){var n=N[i];return groupOn[n.g]!==false&&(!opts.diffOnly||n.d>0);}
function unitOf(i){var n=N[i];if(n.k!=="o")return "v"+i;var p=n.gp;if(p===undefined||p<0)
 return "o"+i;var a=ancestors(p);for(var k=0;k<a.length;k++)if(!expanded[a[k]])return "g"+a[k];
 return "o"+i;}
function groupShown(g){return gCount(g)>0;}
var gcCache={};
function gCount(g){if(gcCache[g]!==undefined)return gcCache[g];var c=0;gOps[g].forEach(
 function(i){if(opShown(i))c++;});gKids[g].forEach(function(k){c+=gCount(k);});
 return (gcCache[g]=c);}
// ---- the ELK graph of what is visible
function textW(s,px,bold){var c=textW.c||(textW.c=document.createElement("canvas").getContext("2d"));
 c.font=(bold?"bold ":"")+px+"px Helvetica,Arial,sans-serif";return c.measureText(s).width;}
function stateLines(i){if(!opts.params)return [];var out=[];ins[i].forEach(function(v){
 if(isState(v))out.push(N[v].t+" "+N[v].sh);});if(out.length>4)out=out.slice(0,3).concat(
 ["+"+(out.length-3)+" more"]);return out;}
function unitInfo(u){var k=u[0],i=+u.slice(1);
 if(k==="o"){var n=N[i],ls=stateLines(i),w=textW(n.t,12)+24;
  ls.forEach(function(l){w=Math.max(w,textW(l,10)+16);});
  if(subBlocks(i).length)w+=26;
  return {w:Math.min(Math.max(w,56),340),h:26+ls.length*12,lines:ls};}
 if(k==="v"){return {w:Math.min(Math.max(textW(N[i].t,12)+24,56),320),h:26};}
 // room for the second line as drawn (unitSvg), with the time the overlay (T) may add
 var g=G[i],sub=g.c+" ops"+(g.k==="series"?" \u00b7 "+g.x+" alike":"")+(PROF?" \u00b7 "+
  groupMs(i).toFixed(2)+" ms":"");
 var w=Math.max(textW(g.n,13,true)+34,textW(sub,11)+24,90);
 return {w:Math.min(w,360),h:g.k==="series"?44:38};}
function build(){
 gcCache={};var units={},order=[],cont={},edges={},compounds={};
 function addUnit(u){if(units[u])return;units[u]=unitInfo(u);order.push(u);}
 OPS.forEach(function(i){if(opShown(i))addUnit(unitOf(i));});
 function addEdge(a,b,v){if(a===b)return;var key=a+">"+b,e=edges[key];
  if(!e)e=edges[key]={a:a,b:b,vars:[],seen:{},n:0};if(e.seen[v])return;e.seen[v]=1;e.n++;
  if(e.vars.length<50)e.vars.push(v);}
 FLOW.forEach(function(f){if(opShown(f[0])&&opShown(f[1]))addEdge(unitOf(f[0]),unitOf(f[1]),f[2]);});
 // variables fed from outside are input nodes; parameters too when not drawn inside ops
 SRC.forEach(function(f){if(opShown(f[1])){addUnit("v"+f[0]);addEdge("v"+f[0],unitOf(f[1]),f[0]);}});
 if(!opts.params)N.forEach(function(n,v){if(!isState(v))return;outs[v].forEach(function(c){
  if(opShown(c)&&!pred[c].some(function(w){return outs[w].indexOf(v)>=0&&ins[v].indexOf(w)>=0;})){
   addUnit("v"+v);addEdge("v"+v,unitOf(c),v);}});});
 function parentOf(u){var k=u[0],i=+u.slice(1),p;if(k==="o")p=N[i].gp;else if(k==="g")p=G[i].p;
  else{var o=outs[i].filter(opShown)[0];if(o===undefined||!opts.params&&isState(i))return -1;
   p=N[o].gp;var uo=unitOf(o);if(uo[0]==="g")p=G[+uo.slice(1)].p;}
  if(p===undefined)p=-1;return p;}
 var root={id:"root",children:[],edges:[],layoutOptions:rootOptions(order.length)};
 function container(g){if(g<0)return root;if(compounds[g])return compounds[g];
  var c={id:"G"+g,children:[],layoutOptions:compoundOptions(G[g].n+" ("+G[g].c+" ops)")};
  if(isBig(g)){c.layoutOptions["elk.hierarchyHandling"]="SEPARATE_CHILDREN";
   c.layoutOptions["elk.algorithm"]="box";c.layoutOptions["elk.aspectRatio"]="1.6";
   c.layoutOptions["elk.spacing.nodeNode"]="10";}
  else if(bigAbove(g)>=0){c.layoutOptions["elk.algorithm"]="layered";
   c.layoutOptions["elk.direction"]="DOWN";}
  compounds[g]=c;container(G[g].p).children.push(c);return c;}
 var subs={},subEdges={};
 order.forEach(function(u){var inf=units[u],node={id:u,width:Math.round(inf.w),height:inf.h},
  pu=parentOf(u),i=+u.slice(1);container(pu).children.push(node);
  if(isBig(pu)){var at=u[0]==="g"?gKids[pu].indexOf(i):gOps[pu].indexOf(i);   // rows keep order
   node.layoutOptions={"elk.priority":String(100000-Math.max(at,0))};}
  if(u[0]!=="o"||!subOpen[i]||!subBlocks(i).length)return;
  node.children=[];node.layoutOptions=compoundOptions(N[i].t+" #"+N[i].ix+" (block "+
   subBlocks(i).join(", ")+", inline)");
  delete node.width;delete node.height;
  subBlocks(i).forEach(function(bk){var sv=subView(bk);sv.ops.forEach(function(k){
    var id="s"+bk+"_"+k,t=sv.v.nodes[k].t;subs[id]=1;
    node.children.push({id:id,width:Math.round(Math.min(Math.max(textW(t,12)+24,56),320)),height:26});});
   sv.flow.forEach(function(f){var a="s"+bk+"_"+f[0],c="s"+bk+"_"+f[1],key=a+">"+c;
    if(subEdges[key])return;var vn=sv.v.nodes[f[2]];subEdges[key]={a:a,b:c,label:vn.sh||vn.t};});});});
 Object.keys(subEdges).forEach(function(k,j){var e=subEdges[k];root.edges.push({id:"x"+j,
  sources:[e.a],targets:[e.b]});});
 // an open series of many alike instances is packed in rows (ELK's box layout, its own run):
 // edges from outside end at its box; edges inside one instance stay in that instance
 var edges2={},inner={};
 Object.keys(edges).forEach(function(k){var e=edges[k],pa=parentOf(e.a),pb=parentOf(e.b),
  sa=bigAbove(pa,true),sb=bigAbove(pb,true),a=e.a,b=e.b,where=root;
  if(sa!==sb||sa<0){if(sa>=0)a="G"+sa;if(sb>=0)b="G"+sb;if(a===b)return;}
  else{var ca=ancestors(pa),cb=ancestors(pb),lca=-1;for(var q=0;q<ca.length&&ca[q]===cb[q];q++)
   lca=ca[q];where=container(lca);}
  var key=a+">"+b,f=edges2[key];if(!f)f=edges2[key]={a:a,b:b,vars:[],n:0,where:where};
  f.n+=e.n;e.vars.forEach(function(v){if(f.vars.length<50&&f.vars.indexOf(v)<0)f.vars.push(v);});});
 // shapes as ELK edge labels (placed without overlaps) while the graph is small enough
 var placeLabels=opts.shapes&&opts.elkLabels&&order.length<=150;
 Object.keys(edges2).forEach(function(k,j){var e=edges2[k],r={id:"e"+j,sources:[e.a],targets:[e.b]};
  if(placeLabels){var t=edgeLabel(e.vars,e.n);r.labels=[{id:"l"+j,text:t,width:Math.ceil(textW(t,10))+4,
   height:12}];}(e.where.edges||(e.where.edges=[])).push(r);e.id="e"+j;delete e.where;});
 edges=edges2;
 return {root:root,units:units,edges:edges,compounds:compounds,subs:subs,subEdges:subEdges};}
// a compound node is at least as wide as its title. (elkjs 0.11, direction DOWN, hierarchy
// INCLUDE_CHILDREN: a compound's nodeSize.minimum is read as (height, width); the browser
// tests check that titles fit their boxes.)
function compoundOptions(title){return {"elk.padding":"[top=28,left=12,bottom=12,right=12]",
 "elk.nodeSize.constraints":"MINIMUM_SIZE","elk.nodeSize.minimum":"(40,"+Math.ceil(textW(title,12,true)+
 30)+")"};}
// a series of independent instances opened with more than 12 visible (161 momentum updates)
// is packed in rows; a chain of alike blocks stays a column
function isBig(g){return g>=0&&G[g].k==="series"&&!!G[g].par&&!!expanded[g]&&
 (gKids[g].filter(groupShown).length+
 gOps[g].filter(opShown).length)>12;}
function bigAbove(g,self){var a=g>=0?ancestors(g):[];for(var k=0;k<a.length;k++)
 if(isBig(a[k])&&(self||a[k]!==g))return a[k];return -1;}
function rootOptions(n){var o={"elk.algorithm":"layered","elk.direction":"DOWN",
 "elk.hierarchyHandling":"INCLUDE_CHILDREN","org.eclipse.elk.json.shapeCoords":"ROOT",
 "org.eclipse.elk.json.edgeCoords":"ROOT","elk.spacing.nodeNode":"18",
 "elk.layered.spacing.nodeNodeBetweenLayers":"20","elk.layered.spacing.edgeNodeBetweenLayers":"12",
 "elk.layered.spacing.edgeEdgeBetweenLayers":"6","elk.spacing.edgeNode":"10",
 "elk.layered.nodePlacement.strategy":"BRANDES_KOEPF",
 "elk.layered.considerModelOrder.strategy":"NODES_AND_EDGES"};
 if(n>150){o["elk.layered.thoroughness"]="1";o["elk.edgeRouting"]="POLYLINE";
  o["elk.layered.layering.strategy"]="LONGEST_PATH_SOURCE";}
 return o;}
// ---- the worker
function startWorker(){var src="("+flElkWorker.toString()+")();";
 worker=new Worker(URL.createObjectURL(new Blob([src],{type:"application/javascript"})));
 worker.onmessage=function(ev){var m=ev.data,cb=pending[m.id];delete pending[m.id];
  if(cb)cb(m.error,m.data);};
 worker.onerror=function(ev){console.error("layout worker: "+ev.message);};
 post({cmd:"register",algorithms:["layered"]},function(){});}
var msgId=0;
function post(msg,cb){msg.id=++msgId;pending[msg.id]=cb;worker.postMessage(msg);}
var layoutSeq=0;
function relayout(anchor,done){var seq=++layoutSeq,b=build(),t0=performance.now();
 $("busy").hidden=false;var before=anchor?screenOf(anchor):null;
 post({cmd:"layout",graph:b.root,layoutOptions:{},options:{}},function(err,res){
  if(seq!==layoutSeq)return;$("busy").hidden=true;
  if(err){console.error("ELK layout failed: "+JSON.stringify(err).slice(0,300));return;}
  var prev=boxes,pv={x:view.x,y:view.y,k:view.k};
  layouts++;lay={res:res,b:b,ms:performance.now()-t0};render();
  if(before){var now=boxOf(anchor.now||anchor.id);if(now){view.x+=before[0]-(now.x*view.k+view.x);
   view.y+=before[1]-(now.y*view.k+view.y);apply();}}
  if(window.fluidliteViewer)animateFrom(prev,pv);      // not while the first view is sought
  if(done)done();});}
// nodes glide from where they were on the screen to their new places; edges and open groups
// fade in (a short animation, so the eye follows what moved)
var anim=null;
function animateFrom(prev,pv){var moves=[];
 document.querySelectorAll("#gn .u").forEach(function(el){var u=el.getAttribute("data-u"),p=prev[u],
  b=boxes[u];if(!p||!b)return;var sx=((p.x*pv.k+pv.x)-view.x)/view.k,sy=((p.y*pv.k+pv.y)-view.y)/view.k;
  if(Math.abs(sx-b.x)+Math.abs(sy-b.y)>1)moves.push([el,sx,sy,b.x,b.y]);});
 ["gg","ge","gl","gt"].forEach(function(id){var el=$(id);el.classList.remove("fin");void el.getBBox;
  el.getBoundingClientRect();el.classList.add("fin");});
 if(!moves.length)return;var t0=performance.now(),dur=240,me={};anim=me;
 function step(now){if(anim!==me)return;var f=Math.min(1,(now-t0)/dur),e=f<.5?2*f*f:1-Math.pow(2-2*f,2)/2;
  moves.forEach(function(m){m[0].setAttribute("transform","translate("+(m[1]+(m[3]-m[1])*e)+","+
   (m[2]+(m[4]-m[2])*e)+")");});if(f<1)requestAnimationFrame(step);else anim=null;}
 moves.forEach(function(m){m[0].setAttribute("transform","translate("+m[1]+","+m[2]+")");});
 requestAnimationFrame(step);}
function screenOf(a){var b=boxes[a.id];return b?[b.x*view.k+view.x,b.y*view.k+view.y]:null;}
function boxOf(id){return boxes[id];}
// ---- drawing
function render(){anim=null;boxes={};var h=[],he=[],hl=[],ht=[],res=lay.res,b=lay.b;
 function walk(node){(node.children||[]).forEach(function(c){boxes[c.id]={x:c.x,y:c.y,w:c.width,
  h:c.height};if(c.id[0]==="G"){var g=+c.id.slice(1);frame(c,"gx",G[g].n,"("+G[g].c+" ops)",h,ht);
   walk(c);}
  else if(c.children&&c.children.length){var n=N[+c.id.slice(1)];frame(c,"gx sbx",n.t+" #"+n.ix,
   "(block "+subBlocks(+c.id.slice(1)).join(", ")+", inline)",h,ht);walk(c);}});}
 walk(res);var nodesH=[],allEdges=[];
 (function eds(node){(node.edges||[]).forEach(function(e){allEdges.push(e);});
  (node.children||[]).forEach(eds);})(res);
 Object.keys(b.units).forEach(function(u){var bx=boxes[u];if(bx&&!(u[0]==="o"&&subOpen[+u.slice(1)]&&
  subBlocks(+u.slice(1)).length))nodesH.push(unitSvg(u,bx,b.units[u]));});
 Object.keys(b.subs).forEach(function(u){var bx=boxes[u];if(!bx)return;var sn=subNode(u),st=opStyle(sn.n.g);
  nodesH.push('<g class="u o so" data-u="'+u+'" transform="translate('+bx.x+','+bx.y+')"><title>'+
   esc(sn.n.t+" #"+sn.n.ix+" in block "+sn.b)+'</title><rect class="bx" width="'+bx.w+'" height="'+bx.h+
   '" rx="4" fill="'+st[0]+'" stroke="rgba(0,0,0,.35)"/><text class="t1" x="'+(bx.w/2)+
   '" y="17" text-anchor="middle" fill="'+st[1]+'">'+esc(sn.n.t)+'</text></g>');});
 allEdges.forEach(function(e){var s=e.sections&&e.sections[0];if(!s)return;
  var pts=[s.startPoint].concat(s.bendPoints||[],[s.endPoint]);
  var d="M"+pts.map(function(p){return p.x+","+p.y;}).join("L");
  var key=e.sources[0]+">"+e.targets[0],info=b.edges[key];
  if(!info){var se=b.subEdges[key];he.push('<path class="e" data-e="'+esc(key)+
   '" marker-end="url(#arr)" d="'+d+'"/>');return;}
  he.push('<path class="e'+(info.n>1?" many":"")+'" data-e="'+esc(key)+
   '" marker-end="url(#arr)" d="'+d+'"/>');
  var L0=e.labels&&e.labels[0];
  if(opts.shapes&&L0&&L0.x!==undefined){hl.push('<text class="el" data-e="'+esc(key)+'" x="'+
   (L0.x+2)+'" y="'+(L0.y+10)+'">'+esc(L0.text)+'</text>');}
  else if(opts.shapes){var lab=edgeLabel(info.vars,info.n),best=0,bi=0;for(var k=1;k<pts.length;k++){
   var L=Math.abs(pts[k].x-pts[k-1].x)+Math.abs(pts[k].y-pts[k-1].y);if(L>best){best=L;bi=k;}}
   if(bi&&best>24){var mx=(pts[bi].x+pts[bi-1].x)/2,my=(pts[bi].y+pts[bi-1].y)/2;
    hl.push('<text class="el" data-e="'+esc(key)+'" x="'+(mx+4)+'" y="'+(my+3)+'">'+
    esc(lab)+'</text>');}}});
 $("gg").innerHTML=h.join("");$("ge").innerHTML=he.join("");$("gl").innerHTML=hl.join("");
 $("gt").innerHTML=ht.join("");$("gn").innerHTML=nodesH.join("");markHits();markSel();markTrace();drawMini(true);zoomClass();}
// an open group's box and title (cut to the box's width; the whole title is its tooltip) into
// h (#gg, under the edges: clicks and tests use it), and into ht (#gt, over the edges and edge
// labels, under the nodes) the title again on an opaque bar, so that edges entering the group
// pass under its title instead of over it (the bar lets clicks through to #gg)
function fit1(t,px,bold,w){if(textW(t,px,bold)<=w)return t;while(t.length>1&&textW(t+"\u2026",px,bold)>w)
 t=t.slice(0,-1);return t+"\u2026";}
function frame(c,cls,name,extra,h,ht){var room=c.width-14,a="\u25BE "+name,nm=fit1(a,12,true,room),
 rest=nm===a?fit1(" "+extra,12,false,room-textW(a,12,true)):"",
 txt='<text x="'+(c.x+8)+'" y="'+(c.y+17)+'">'+esc(nm)+(rest&&rest!=="\u2026"?
  '<tspan style="font-weight:normal">'+esc(rest)+'</tspan>':"")+'</text>';
 h.push('<g class="'+cls+'" data-u="'+c.id+'"><title>'+esc(name+" "+extra)+'</title><rect x="'+c.x+
  '" y="'+c.y+'" width="'+c.width+'" height="'+c.height+'"/>'+txt+'</g>');
 ht.push('<g class="tb"><rect x="'+(c.x+1.5)+'" y="'+(c.y+1.5)+'" width="'+Math.max(0,c.width-3)+
  '" height="22"/>'+txt+'</g>');}
function edgeLabel(vs,count){var n=N[vs[0]],s=n.sh||n.t;if(count>1)return count+" tensors";
 return s;}
function unitSvg(u,bx,inf){var k=u[0],i=+u.slice(1),x=bx.x,y=bx.y,w=bx.w,hh=bx.h,t=
 ' transform="translate('+x+','+y+')"';
 if(k==="o"){var n=N[i],st=opFill(i),out='<g class="u o d'+(n.d||0)+'" data-u="'+u+'"'+t+'>'+
  '<title>'+esc(n.t+" #"+n.ix+" ("+(GROUP_LABEL[n.g]||n.g)+")"+(PROF?" \u00b7 "+
  (opMs(i)>0?opMs(i)+" ms/call":"not timed"):""))+'</title><rect class="bx" width="'+
  w+'" height="'+hh+'" rx="4" fill="'+st[0]+'" stroke="rgba(0,0,0,.35)"/><text class="t1" x="'+
  (w/2)+'" y="17" text-anchor="middle" fill="'+st[1]+'">'+esc(n.t)+'</text>';
  inf.lines.forEach(function(l,j){out+='<text class="pi" x="8" y="'+(33+j*12)+'" fill="'+st[1]+
   '">'+esc(l)+'</text>';});if(subBlocks(i).length)out+='<text class="sbt" x="'+(w-4)+
   '" y="17" text-anchor="end" fill="'+st[1]+'">[+]</text>';return out+'</g>';}
 if(k==="v"){var v=N[i];return '<g class="u vn" data-u="'+u+'"'+t+'><title>'+esc(v.t)+
  '</title><rect class="bx" width="'+w+'" height="'+hh+'" rx="12"/><text class="t1" x="'+(w/2)+
  '" y="17" text-anchor="middle">'+esc(v.t)+'</text></g>';}
 var g=G[i],st2=opts.time&&PROF?[heat(groupMs(i),profSum)]:opStyle(g.g),
 sh=g.k==="series"?'<rect class="sh" x="6" y="6" width="'+(w-6)+
  '" height="'+(hh-6)+'" rx="6"/>':"",bw=g.k==="series"?w-6:w,bh=g.k==="series"?hh-6:hh;
 return '<g class="u gc" data-u="'+u+'"'+t+'><title>'+esc(g.n+" \u2014 "+g.c+" ops (click to expand)")+
  '</title>'+sh+'<rect class="bx" width="'+bw+'" height="'+bh+'" rx="6"/><rect width="6" height="'+
  bh+'" rx="2" fill="'+st2[0]+'"/><text class="t1b" x="14" y="17">\u25B8 '+esc(g.n)+
  '</text><text class="t2" x="14" y="31">'+g.c+' ops'+(g.k==="series"?
  " \u00b7 "+g.x+" alike":"")+(opts.time&&PROF?" \u00b7 "+groupMs(i).toFixed(2)+" ms":"")+'</text>'+
  (gDiff[i][1]||gDiff[i][2]?'<text class="t2 dd" x="'+(bw-6)+
  '" y="31" text-anchor="end">'+(gDiff[i][1]?"+"+gDiff[i][1]:"")+(gDiff[i][2]?" ~"+gDiff[i][2]:"")+
  '</text>':"")+'</g>';}
function groupMs(g){var t=0;unitOps("g"+g).forEach(function(o){t+=opMs(o);});return t;}
function apply(){vp.setAttribute("transform","translate("+view.x+","+view.y+") scale("+view.k+")");
 zoomClass();drawMini(false);}
function zoomClass(){svg.classList.toggle("small",view.k<0.6);}
function bounds(){var r=lay&&lay.res;if(!r)return [0,0,100,100];return [0,0,r.width||100,r.height||100];}
function fit(){var b=bounds(),W=stage.clientWidth||800,H=stage.clientHeight||600;
 var k=Math.min(W/(b[2]-b[0]+30),H/(b[3]-b[1]+30),1.6);k=Math.max(k,0.05);
 view.k=k;view.x=(W-(b[2]+b[0])*k)/2;view.y=(H-(b[3]+b[1])*k)/2;apply();}
function zoom(f,cx,cy){var W=stage.clientWidth,H=stage.clientHeight;
 if(cx===undefined){cx=W/2;cy=H/2;}var k=Math.max(0.05,Math.min(6,view.k*f));
 view.x=cx-(cx-view.x)*k/view.k;view.y=cy-(cy-view.y)*k/view.k;view.k=k;apply();}
function centreOn(id){var b=boxes[id];if(!b)return;var W=stage.clientWidth,H=stage.clientHeight;
 if(view.k<0.8)view.k=1;view.x=W/2-(b.x+b.w/2)*view.k;view.y=H/2-(b.y+b.h/2)*view.k;apply();}
// ---- expand / collapse
function toggleGroup(g,anchorId){var was=!!expanded[g];expanded[g]=!was;
 if(was)Object.keys(expanded).forEach(function(k){if(expanded[k]&&ancestors(+k).indexOf(g)>=0&&+k!==g)
  expanded[k]=false;});
 relayout({id:anchorId||(was?"G"+g:"g"+g),now:was?"g"+g:"G"+g},function(){
  if(sel)markSel();buildTree();});}
function firstView(){expanded={};var budget=16,count=rootG.filter(groupShown).length+
 rootOps.filter(opShown).length,queue=rootG.slice();
 while(queue.length){var g=queue.shift();if(!groupShown(g))continue;
  var kids=gKids[g].filter(groupShown).length+gOps[g].filter(opShown).length;
  var only=kids===1?gKids[g].filter(groupShown)[0]:undefined;
  if((kids>1||only!==undefined&&G[only].k!=="series")&&count-1+kids<=budget){expanded[g]=true;
   count+=kids-1;queue=queue.concat(gKids[g]);}}}
// ---- selection and panel
function unitOps(u){var k=u[0],i=+u.slice(1);if(k==="o")return [i];if(k==="v")return [];
 var out=[];(function rec(g){gOps[g].forEach(function(o){if(opShown(o))out.push(o);});
  gKids[g].forEach(rec);})(i);return out;}
function markSel(){document.querySelectorAll("#gn .sel,#gg .sel").forEach(function(el){
 el.classList.remove("sel");});if(!sel)return;var el=document.querySelector('[data-u="'+sel+'"]');
 if(el)el.classList.add("sel");}
function link(i){var n=N[i];return '<a class="nl" data-i="'+i+'">'+esc(n.k==="o"?n.t+" #"+n.ix:n.t)+
 '</a>'+(n.k==="v"&&(n.sh||n.dt)?' <code>'+esc(n.sh+" "+n.dt)+'</code>':'');}
var byName={};N.forEach(function(n,i){if(n.k==="v")byName[n.t]=i;});
function slots(t){var h=[];Object.keys(t).forEach(function(k){h.push('<tr><td>'+esc(k)+'</td><td>'+
 t[k].map(function(v){return byName[v]!==undefined?link(byName[v]):esc(v);}).join("<br>")+
 '</td></tr>');});return h.join("")||'<tr><td colspan="2"><i>none</i></td></tr>';}
function row(k,v){return '<tr><td>'+esc(k)+'</td><td>'+v+'</td></tr>';}
function select(u){if(u[0]==="s")return selectSub(u);sel=u;markSel();var k=u[0],i=+u.slice(1),h=[];
 var acts='<p><a class="act" data-a="trace">trace (t)</a><a class="act" data-a="centre">centre</a>'+
  (k==="g"||k==="G"?'<a class="act" data-a="toggle">'+(k==="g"?"expand":"collapse")+' (e)</a>':"")+'</p>';
 if(k==="o"){var n=N[i],a={};try{a=JSON.parse(n.a);}catch(err){}
  h.push('<h2>op <span id="ptype">'+esc(n.t)+'</span></h2>'+acts+'<table>'+row("index","#"+n.ix+
   " in block "+n.b)+row("op_role",esc(n.rn)+" ("+n.r+")")+row("group",esc(GROUP_LABEL[n.g]||n.g))+
   row("pass",esc(n.p))+row("name scope",'<code>'+esc(n.ns||"/")+'</code>')+
   (PROFOP&&PROFOP[n.b+":"+n.ix]?row("time",'<span id="ptime">'+PROFOP[n.b+":"+n.ix][0]+
    " ms per call</span> (this op, "+PROFOP[n.b+":"+n.ix][1]+" timed run"+
    (PROFOP[n.b+":"+n.ix][1]===1?"":"s")+")"):PROFOP?row("time","not timed: no step of the "+
    "profiled plan ran it (skipped, or folded into another step)"):"")+
   (PROF&&PROF[n.t]?row("type time",PROF[n.t][0]+" ms per call (average of the "+PROF[n.t][1]+
    " timed "+esc(n.t)+" calls)"):"")+
   (n.gp>=0?row("in group",esc(ancestors(n.gp).map(function(g){return G[g].n;}).join(" \u203A "))):"")+
   row("created at",'<code id="pcall">'+esc(n.cs||"(unknown)")+'</code>')+
   (n.rv?row("op_role_var",'<code>'+esc(n.rv)+'</code>'):"")+(n.sb?row("sub-blocks",
   n.sb.map(function(b){return (ALL.multi?'<a class="bl" data-b="'+b+'">open block '+b+'</a>':
   "block "+b)+(subView(b)?' \u00b7 <a class="act" data-a="sub">'+(subOpen[i]?"collapse inline":
   "expand inline")+'</a>':"");}).join("<br>")):"")+(n.d?row("diff",["","added","changed","removed"][n.d]):"")+
   '</table><h3>Inputs</h3><table>'+slots(n.i)+'</table><h3>Outputs</h3><table>'+slots(n.o)+
   '</table><h3>Attributes</h3><table>');
  Object.keys(a).forEach(function(x){h.push(row(x,'<code>'+esc(JSON.stringify(a[x]))+'</code>'));});
  if(!Object.keys(a).length)h.push('<tr><td colspan="2"><i>none</i></td></tr>');h.push('</table>');}
 else if(k==="v"){var v=N[i];h.push('<h2>variable <span id="ptype">'+esc(v.t)+'</span></h2>'+acts+
  '<table>'+row("category",esc(v.g))+row("shape",'<code>'+esc(v.sh)+'</code>')+row("dtype",esc(v.dt))+
  row("persistable",v.ps?"yes":"no")+'</table><h3>Consumers ('+outs[i].length+')</h3>'+
  outs[i].map(link).join("<br>"));}
 else{var g=G[i],ops=unitOps(u),cnt={};ops.forEach(function(o){cnt[N[o].t]=(cnt[N[o].t]||0)+1;});
  h.push('<h2>group <span id="ptype">'+esc(g.n)+'</span></h2>'+acts+'<table>'+row("kind",esc(g.k))+
   row("path",esc(ancestors(i).map(function(x){return G[x].n;}).join(" \u203A ")))+
   (g.f?row("name scope",'<code>'+esc(g.f)+'</code>'):"")+row("ops",String(g.c))+
   (g.x?row("instances",String(g.x)):"")+(PROF?row("time",'<span id="ptime">'+groupMs(i).toFixed(3)+
   ' ms</span> (sum of its ops\' times per run)'):"")+'</table><h3>Op types</h3><table>');
  Object.keys(cnt).sort(function(a,b){return cnt[b]-cnt[a];}).slice(0,25).forEach(function(t){
   h.push(row(t,String(cnt[t])));});h.push('</table>');
  if(g.k==="series"){h.push('<h3>Instances</h3>'+gKids[i].slice(0,60).map(function(c){
   return esc(G[c].n);}).join("<br>"));}}
 $("pbody").innerHTML=h.join("");$("panel").hidden=false;}
function selectSub(u){sel=u;markSel();var sn=subNode(u),n=sn.n,a={};try{a=JSON.parse(n.a);}catch(err){}
 var names=function(t){return Object.keys(t).map(function(k){return row(k,'<code>'+esc(t[k].join(", "))+
  '</code>');}).join("");};
 $("pbody").innerHTML='<h2>op <span id="ptype">'+esc(n.t)+'</span></h2><table>'+row("index","#"+n.ix+
  " in block "+sn.b)+row("op_role",esc(n.rn)+" ("+n.r+")")+row("name scope",'<code>'+
  esc(sn.v.strs[n.ns]||"/")+'</code>')+row("created at",'<code>'+esc(sn.v.strs[n.cs]||"(unknown)")+
  '</code>')+'</table><p><a class="bl" data-b="'+sn.b+'">open block '+sn.b+'</a></p><h3>Inputs</h3><table>'+
  names(n.i)+'</table><h3>Outputs</h3><table>'+names(n.o)+'</table><h3>Attributes</h3><table>'+
  Object.keys(a).map(function(x){return row(x,'<code>'+esc(JSON.stringify(a[x]))+'</code>');}).join("")+
  '</table>';$("panel").hidden=false;}
function closePanel(){$("panel").hidden=true;sel=null;markSel();}
$("pbody").addEventListener("click",function(ev){var a=ev.target.closest("a");if(!a)return;
 if(a.classList.contains("bl")){openBlock(+a.getAttribute("data-b"));return;}
 if(a.classList.contains("act")){var act=a.getAttribute("data-a");if(act==="trace")toggleTrace();
  else if(act==="centre")centreOn(sel);
  else if(act==="sub"&&sel)toggleSub(+sel.slice(1));else if(act==="toggle"&&sel)toggleGroup(+sel.slice(1),sel);
  return;}
 if(a.classList.contains("nl")){var i=+a.getAttribute("data-i");revealNode(i);}});
function openBlock(b){for(var k=0;k<ALL.views.length;k++)if(ALL.views[k].block===b){
 location.hash="block="+b;location.reload();return;}}
function revealNode(i,cb){var n=N[i];if(n.k==="o"&&!opShown(i)){groupOn[n.g]=true;opts.diffOnly=false;
  syncSide();}var u=unitOf(i),need=false;
 if(n.k==="o"&&n.gp>=0)ancestors(n.gp).forEach(function(g){if(!expanded[g]){expanded[g]=true;need=true;}});
 if(n.k==="v")u="v"+i;if(n.k==="o")u="o"+i;
 var go=function(){if(boxes[u]){select(u);centreOn(u);}else if(n.k==="v"&&outs[i].length)
  revealNode(outs[i][0]);if(cb)cb();};
 if(need||!boxes[u]&&n.k==="o")relayout(null,function(){buildTree();go();});else go();}
function revealGroup(g,cb){var need=false;ancestors(G[g].p).forEach(function(a){
 if(!expanded[a]){expanded[a]=true;need=true;}});var u=(expanded[g]?"G":"g")+g;
 var go=function(){select(u);centreOn(u);if(cb)cb();};
 if(need)relayout(null,function(){buildTree();go();});else go();}
// ---- trace: every ancestor and descendant (through variables) of the selection
function toggleTrace(){if(trace){trace=null;markTrace();return;}if(!sel)return;
 var start=sel[0]==="v"?outs[+sel.slice(1)]:unitOps(sel),up={},down={};
 function walk(seen,next){var st=start.slice();while(st.length){var o=st.pop();if(seen[o])continue;
  seen[o]=1;next[o].forEach(function(p){if(!seen[p])st.push(p);});}}
 walk(up,pred);walk(down,succ);
 var units={};Object.keys(up).concat(Object.keys(down)).forEach(function(o){
  if(opShown(+o))units[unitOf(+o)]=1;});units[sel]=1;
 if(sel[0]==="v")units[sel]=1;trace={units:units,up:up,down:down};markTrace();}
function markTrace(){var g=$("vp");g.classList.toggle("tracing",!!trace);
 document.querySelectorAll(".tr").forEach(function(el){el.classList.remove("tr");});if(!trace)return;
 document.querySelectorAll("#gn .u").forEach(function(el){if(trace.units[el.getAttribute("data-u")])
  el.classList.add("tr");});
 document.querySelectorAll("#ge .e,#gl .el").forEach(function(el){var k=el.getAttribute("data-e")
  .split(">");if(trace.units[k[0]]&&trace.units[k[1]])el.classList.add("tr");});
 $("hits").textContent="trace: "+Object.keys(trace.units).length+" nodes";}
// ---- search: op type, variable name, name scope, op_role, pass, attributes, group names
var index=null;
function buildIndex(){index=[];G.forEach(function(g,i){index.push({k:"group",g:i,s:(g.n+" "+(g.f||"")+
 " "+g.k+(g.k==="pass"?" "+(GROUP_LABEL[g.g]||g.g):"")).toLowerCase()});});
 OPS.forEach(function(i){var n=N[i];index.push({k:"op",i:i,s:(n.t+" "+n.ns+" "+n.rn+" "+n.p+" "+
  (GROUP_LABEL[n.g]||"")+" "+n.a+" "+Object.keys(n.i).map(function(k){return n.i[k].join(" ");}).join(" ")+
  " "+Object.keys(n.o).map(function(k){return n.o[k].join(" ");}).join(" ")).toLowerCase()});});
 N.forEach(function(n,i){if(n.k==="v")index.push({k:"var",i:i,s:n.t.toLowerCase()});});}
var searchTimer=null;
function runSearch(){var q=$("search").value.trim(),re=null,box=$("results");results=[];resAt=-1;
 $("search").classList.remove("bad");if(!q){box.hidden=true;$("hits").textContent="";markHits();return;}
 if(!index)buildIndex();
 if(/[\\^$*+?()[\]{}|]/.test(q)){try{re=new RegExp(q,"i");}catch(err){
  $("search").classList.add("bad");$("hits").textContent="bad regex";box.hidden=true;return;}}
 var ql=q.toLowerCase();index.forEach(function(r){if(re?re.test(r.s):r.s.indexOf(ql)>=0)results.push(r);});
 results.sort(function(a,b){return (a.k==="group"?0:a.k==="op"?1:2)-(b.k==="group"?0:b.k==="op"?1:2);});
 $("hits").textContent=results.length+" match"+(results.length===1?"":"es");
 var h=[];results.slice(0,300).forEach(function(r,j){h.push('<div data-j="'+j+'"><span class="k">'+r.k+
  '</span> '+(r.k==="group"?esc(G[r.g].n)+' <small>'+esc(ancestors(r.g).slice(0,-1).map(function(x){
  return G[x].n;}).join(" \u203A "))+' \u00b7 '+G[r.g].c+' ops</small>':r.k==="op"?esc(N[r.i].t)+
  ' <small>#'+N[r.i].ix+' '+esc(N[r.i].ns||"")+' '+esc(N[r.i].rn)+'</small>':esc(N[r.i].t))+'</div>');});
 if(results.length>300)h.push('<div><small>\u2026 '+(results.length-300)+' more</small></div>');
 box.innerHTML=h.join("");box.hidden=!results.length;markHits();}
function markHits(){document.querySelectorAll("#gn .hit").forEach(function(el){el.classList.remove("hit");});
 var us={};results.forEach(function(r){if(r.k==="op"&&opShown(r.i))us[unitOf(r.i)]=1;
  else if(r.k==="var")us["v"+r.i]=1;else if(r.k==="group")us["g"+r.g]=1;});
 document.querySelectorAll("#gn .u").forEach(function(el){if(us[el.getAttribute("data-u")])
  el.classList.add("hit");});}
function stepResult(d,j){if(!results.length)return;$("results").hidden=true;resAt=j!==undefined?j:
 (resAt+d+results.length)%results.length;var r=results[resAt];
 document.querySelectorAll("#results div.cur").forEach(function(el){el.classList.remove("cur");});
 var el=document.querySelector('#results div[data-j="'+resAt+'"]');if(el){el.classList.add("cur");
  el.scrollIntoView({block:"nearest"});}
 $("hits").textContent=(resAt+1)+" of "+results.length;
 if(r.k==="group")revealGroup(r.g);else revealNode(r.i);}
$("search").addEventListener("focus",function(){if(results.length)$("results").hidden=false;});
$("search").addEventListener("input",function(){clearTimeout(searchTimer);
 searchTimer=setTimeout(runSearch,120);});
$("search").addEventListener("keydown",function(ev){if(ev.key==="Enter"){clearTimeout(searchTimer);
 if(resAt<0&&!results.length)runSearch();stepResult(ev.shiftKey?-1:1);ev.preventDefault();}
 else if(ev.key==="Escape"){this.value="";runSearch();this.blur();}
 else if(ev.key==="ArrowDown"){stepResult(1);ev.preventDefault();}
 else if(ev.key==="ArrowUp"){stepResult(-1);ev.preventDefault();}});
$("results").addEventListener("click",function(ev){var d=ev.target.closest("div[data-j]");
 if(d)stepResult(0,+d.getAttribute("data-j"));});
// ---- minimap
var miniBase=null;
function drawMini(full){var c=$("mini"),r=lay&&lay.res;if(!r)return;var W=c.width=220,H=c.height=150;
 var x=c.getContext("2d"),s=Math.min(W/(r.width||1),H/(r.height||1)),ox=(W-(r.width||0)*s)/2,
 oy=(H-(r.height||0)*s)/2;drawMini.t=[s,ox,oy];
 x.fillStyle=getComputedStyle(document.body).getPropertyValue("--bg")||"#fff";x.fillRect(0,0,W,H);
 Object.keys(boxes).forEach(function(id){var b=boxes[id];if(id[0]==="G"){x.strokeStyle="#95A5A6";
  x.strokeRect(ox+b.x*s,oy+b.y*s,b.w*s,b.h*s);return;}var k=id[0],i=+id.slice(1);
  if(k==="s"){x.fillStyle="#5D6D7E";x.fillRect(ox+b.x*s,oy+b.y*s,Math.max(b.w*s,1.5),
   Math.max(b.h*s,1.5));return;}if(k==="o"&&subOpen[i]&&subBlocks(i).length){x.strokeStyle="#95A5A6";
   x.strokeRect(ox+b.x*s,oy+b.y*s,b.w*s,b.h*s);return;}
  x.fillStyle=k==="o"?opStyle(N[i].g)[0]:k==="g"?opStyle(G[i].g)[0]:"#5DADE2";
  x.fillRect(ox+b.x*s,oy+b.y*s,Math.max(b.w*s,1.5),Math.max(b.h*s,1.5));});
 var Wst=stage.clientWidth,Hst=stage.clientHeight;x.strokeStyle="#E91E63";x.lineWidth=1.5;
 x.strokeRect(ox+(-view.x/view.k)*s,oy+(-view.y/view.k)*s,Wst/view.k*s,Hst/view.k*s);}
function miniGo(ev){var t=drawMini.t;if(!t)return;var r=$("mini").getBoundingClientRect();
 var lx=(ev.clientX-r.left-t[1])/t[0],ly=(ev.clientY-r.top-t[2])/t[0];
 view.x=stage.clientWidth/2-lx*view.k;view.y=stage.clientHeight/2-ly*view.k;apply();}
var miniDrag=false;
$("mini").addEventListener("pointerdown",function(ev){miniDrag=true;miniGo(ev);ev.stopPropagation();});
window.addEventListener("pointerup",function(){miniDrag=false;});
window.addEventListener("pointermove",function(ev){if(miniDrag)miniGo(ev);});
// ---- export the current view as SVG / PNG
function viewSvg(){var W=stage.clientWidth,H=stage.clientHeight,cs=getComputedStyle(document.body);
 var vars=["--bg","--fg","--muted","--edge","--grp","--grpline","--coll","--collline","--hit","--sel"],
 css=Array.prototype.map.call(document.styleSheets[0].cssRules,function(r){return r.cssText;})
  .filter(function(t){return /^(\.e|\.el|\.gx|#gt|\.u|\.gc|\.vn|\.small|\.tracing)/.test(t);}).join("\n");
 vars.forEach(function(v){css=css.split("var("+v+")").join(cs.getPropertyValue(v).trim());});
 var clone=svg.cloneNode(true);clone.setAttribute("width",W);clone.setAttribute("height",H);
 clone.setAttribute("viewBox","0 0 "+W+" "+H);clone.removeAttribute("id");
 var st=document.createElementNS("http://www.w3.org/2000/svg","style");
 st.textContent="text{font-family:Helvetica,Arial,sans-serif}"+css;clone.insertBefore(st,clone.firstChild);
 var bg=document.createElementNS("http://www.w3.org/2000/svg","rect");bg.setAttribute("width",W);
 bg.setAttribute("height",H);bg.setAttribute("fill",cs.getPropertyValue("--bg").trim()||"#fff");
 clone.insertBefore(bg,st.nextSibling);
 return new XMLSerializer().serializeToString(clone);}
function pngDataUrl(){return new Promise(function(resolve,reject){var s=viewSvg(),img=new Image();
 img.onload=function(){var c=document.createElement("canvas"),k=window.devicePixelRatio>1?1:2;
  c.width=stage.clientWidth*k;c.height=stage.clientHeight*k;var x=c.getContext("2d");x.scale(k,k);
  x.drawImage(img,0,0);resolve(c.toDataURL("image/png"));};
 img.onerror=function(){reject(new Error("the SVG of the view did not load as an image"));};
 img.src="data:image/svg+xml;charset=utf-8,"+encodeURIComponent(s);});}
function download(name,url){var a=document.createElement("a");a.href=url;a.download=name;
 document.body.appendChild(a);a.click();a.remove();}
$("savesvg").onclick=function(){download("program.svg",URL.createObjectURL(new Blob([viewSvg()],
 {type:"image/svg+xml"})));};
$("savepng").onclick=function(){pngDataUrl().then(function(u){download("program.png",u);},
 function(e){console.warn(String(e));});};
// ---- side bar
function syncSide(){document.querySelectorAll('#roles input[data-g]').forEach(function(cb){
 cb.checked=groupOn[cb.getAttribute("data-g")]!==false;});
 $("oparams").checked=opts.params;$("oshapes").checked=opts.shapes;
 if($("donly"))$("donly").checked=opts.diffOnly;}
function buildSide(){var cnt={},h=[];OPS.forEach(function(i){cnt[N[i].g]=(cnt[N[i].g]||0)+1;});
 Object.keys(D.opStyles).forEach(function(g){if(!cnt[g])return;h.push('<label><input type="checkbox"'+
  ' data-g="'+g+'" checked><span class="sw" style="background:'+D.opStyles[g][0]+'"></span>'+
  esc(GROUP_LABEL[g]||g)+' ops ('+cnt[g]+')</label>');});
 $("roles").innerHTML=h.join("");
 $("roles").addEventListener("change",function(ev){var g=ev.target.getAttribute("data-g");
  groupOn[g]=ev.target.checked;relayout(sel?{id:sel}:null,buildTree);});
 $("info").innerHTML='<p>block '+D.block+' of '+D.nblocks+' \u00b7 '+OPS.length+' ops \u00b7 '+
  (N.length-OPS.length)+' variables \u00b7 '+G.length+' groups \u00b7 layout: ELK layered</p>'+
  (ALL.multi?'<p>blocks: '+ALL.views.map(function(v){return v.block===D.block?'<b>'+v.block+'</b>':
  '<a class="bl nl" data-b="'+v.block+'">'+v.block+'</a>';}).join(" ")+'</p>':"");
 $("info").addEventListener("click",function(ev){var bl=ev.target.closest("a.bl");
  if(bl)openBlock(+bl.getAttribute("data-b"));});
 $("oparams").addEventListener("change",function(ev){opts.params=ev.target.checked;relayout(null);});
 if(PROF){var tl=document.createElement("label");tl.innerHTML='<input type="checkbox" id="otime"> '+
  'time overlay from the profile (T)';$("oshapes").parentNode.after(tl);
  $("otime").addEventListener("change",function(ev){opts.time=ev.target.checked;render();});}
 $("oshapes").addEventListener("change",function(ev){opts.shapes=ev.target.checked;
  opts.elkLabels=true;relayout(sel?{id:sel}:null);});
 if(D.diff){var tot=[0,0,0,0];OPS.forEach(function(i){if(N[i].d)tot[N[i].d]++;});
  $("diffbox").innerHTML='<h3>Changes</h3><p>added ops: '+tot[1]+' \u00b7 changed: '+tot[2]+
   ' \u00b7 removed: '+tot[3]+'</p><label><input type="checkbox" id="donly"> show only what changed</label>';
  $("donly").addEventListener("change",function(ev){opts.diffOnly=ev.target.checked;
   relayout(null,function(){fit();buildTree();});});}
 h=['<h3>Legend</h3>'];Object.keys(D.opStyles).forEach(function(g){if(cnt[g])h.push('<label><span '+
  'class="sw" style="background:'+D.opStyles[g][0]+'"></span>'+esc(D.opStyles[g][3])+'</label>');});
 h.push('<label><span class="sw" style="background:var(--coll)"></span>group (click to expand)</label>');
 $("legend").innerHTML=h.join("");buildTree();}
function buildTree(){var h=[];(function rec(list,depth){list.forEach(function(g){if(!groupShown(g))return;
  h.push('<div data-g="'+g+'" style="padding-left:'+(depth*12)+'px">'+(gKids[g].length||gOps[g].length?
  (expanded[g]?"\u25BE ":"\u25B8 "):"")+esc(G[g].n)+' <small>('+gCount(g)+')</small></div>');
  if(expanded[g])rec(gKids[g],depth+1);});})(rootG,0);$("tree").innerHTML=h.join("")||"<i>none</i>";}
$("tree").addEventListener("click",function(ev){var d=ev.target.closest("div[data-g]");if(!d)return;
 var g=+d.getAttribute("data-g");var id=(expanded[g]?"G":"g")+g;
 if(boxes[id])toggleGroup(g,id);else revealGroup(g);});
// ---- pan, zoom, click
var drag=null;
stage.addEventListener("pointerdown",function(ev){if(ev.target.id==="mini")return;
 drag={x:ev.clientX,y:ev.clientY,vx:view.x,vy:view.y,moved:false};});
window.addEventListener("pointermove",function(ev){if(!drag)return;var dx=ev.clientX-drag.x,
 dy=ev.clientY-drag.y;if(Math.abs(dx)+Math.abs(dy)>3){drag.moved=true;stage.classList.add("drag");}
 if(drag.moved){view.x=drag.vx+dx;view.y=drag.vy+dy;apply();}});
window.addEventListener("pointerup",function(ev){var d=drag;drag=null;stage.classList.remove("drag");
 if(!d||d.moved)return;var t=ev.target.closest?ev.target.closest(".u,.gx>text"):null;
 if(!t)return;if(t.tagName==="text"){var u=t.parentNode.getAttribute("data-u");
  if(u[0]==="o")toggleSub(+u.slice(1));else toggleGroup(+u.slice(1),u);return;}
 var id=t.getAttribute("data-u"),x=ev.clientX-t.getBoundingClientRect().right;
 if(id[0]==="o"&&subBlocks(+id.slice(1)).length&&(ev.detail>=2||x>-26*view.k)){
  toggleSub(+id.slice(1));return;}
 if(id[0]==="g"&&(ev.detail>=2||sel===id)){toggleGroup(+id.slice(1),id);
  return;}select(id);});
stage.addEventListener("wheel",function(ev){ev.preventDefault();var r=stage.getBoundingClientRect();
 zoom(Math.pow(1.0015,-ev.deltaY),ev.clientX-r.left,ev.clientY-r.top);},{passive:false});
$("fit").onclick=fit;$("zin").onclick=function(){zoom(1.25);};$("zout").onclick=function(){zoom(0.8);};
$("helpbtn").onclick=function(){$("help").hidden=!$("help").hidden;};
$("help").onclick=function(){$("help").hidden=true;};
$("darkbtn").onclick=function(){setDark(!document.body.classList.contains("dark"));};
function setDark(on){document.body.classList.toggle("dark",on);drawMini(true);}
$("close").onclick=closePanel;
function toggleGroups(gs){var on=gs.some(function(g){return groupOn[g]===false;});
 gs.forEach(function(g){groupOn[g]=on;});syncSide();relayout(sel?{id:sel}:null,buildTree);}
document.addEventListener("keydown",function(ev){if(ev.target.tagName==="INPUT"||ev.ctrlKey||
 ev.metaKey||ev.altKey)return;var k=ev.key;
 if(k==="/"){$("search").focus();ev.preventDefault();}else if(k==="f")fit();
 else if(k==="+"||k==="=")zoom(1.25);else if(k==="-")zoom(0.8);
 else if(k==="n")stepResult(1);else if(k==="N")stepResult(-1);
 else if(k==="t")toggleTrace();
 else if(k==="e"&&sel&&(sel[0]==="g"||sel[0]==="G"))toggleGroup(+sel.slice(1),sel);
 else if(k==="e"&&sel&&sel[0]==="o"&&subBlocks(+sel.slice(1)).length)toggleSub(+sel.slice(1));
 else if(k==="p"){opts.params=!opts.params;syncSide();relayout(sel?{id:sel}:null);}
 else if(k==="s"){opts.shapes=!opts.shapes;opts.elkLabels=true;syncSide();
  relayout(sel?{id:sel}:null);}
 else if(k==="T"&&PROF){opts.time=!opts.time;$("otime").checked=opts.time;render();}
 else if(k==="D")setDark(!document.body.classList.contains("dark"));
 else if(k==="b")toggleGroups(["backward"]);
 else if(k==="o")toggleGroups(["optimize","gradient_clip","regularization","lr_schedule"]);
 else if(k==="c"){firstView();relayout(null,function(){fit();buildTree();});}
 else if(k==="?")$("help").hidden=!$("help").hidden;
 else if(k==="Escape"){$("help").hidden=true;closePanel();trace=null;markTrace();
  $("search").value="";runSearch();$("hits").textContent="";}});
// ---- start: the first view keeps labels legible (>= 10 px at fit); fewer groups open if not
if(window.matchMedia&&window.matchMedia("(prefers-color-scheme: dark)").matches)setDark(true);
// the first view's layout puts the shapes on the edges (no label layers: compact and quick);
// later layouts let ELK place them
var t0=performance.now(),opened=[];opts.elkLabels=false;
startWorker();buildSide();firstView();opened=Object.keys(expanded).map(Number);
function labelPx(){return 12*view.k;}
function ready(){buildTree();window.fluidliteViewer={ready:true,readyAt:performance.now(),
 firstLayoutMs:performance.now()-t0,nodes:N.length,edges:E.length,groups:G,view:view,fit:fit,
 expanded:expanded,select:select,toggleGroup:toggleGroup,toggleSub:toggleSub,toggleTrace:toggleTrace,
 labelPx:labelPx,layouts:function(){return layouts;},boxes:function(){return boxes;},
 units:function(){return Object.keys(lay.b.units);},unitOf:function(i){return unitOf(i);},
 find:function(id){for(var i=0;i<N.length;i++)if(N[i].id===id)return i;return -1;},
 findGroup:function(name){for(var i=0;i<G.length;i++)if(G[i].n===name)return i;return -1;},
 centre:centreOn,miniTransform:function(){return drawMini.t;},opType:function(i){return N[i].t;},
 nodeDiff:function(i){return N[i].d||0;},exportPNG:pngDataUrl,
 exportSVG:viewSvg,reveal:revealNode,trace:function(){return trace;},
 busy:function(){return !$("busy").hidden||!!anim;}};
 document.body.setAttribute("data-ready","1");}
// too small to read: close the groups opened last
(function first(){relayout(null,function(){fit();
 if(labelPx()<10&&opened.length){expanded[opened.pop()]=false;first();return;}
 opts.elkLabels=true;ready();});})();
})();
